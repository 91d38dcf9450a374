"""Work that runs on its own: chores (titles, learning, idle summaries), scheduled jobs
(schedules, the scheduler, the jobs tool, an app's quotas on its jobs) and helper agents.
"""
