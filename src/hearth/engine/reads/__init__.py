"""What the surfaces read: views of chats, messages and runs, queries, the sidebar, activity,
usage, the settings log.
"""
