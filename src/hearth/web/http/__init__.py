"""The web app's HTTP plumbing: who a request is (auth, sign-in, permissions and what an app may
use), what routes are handed (deps), errors as the envelope, headers, limits on bodies, quotas
and open files, the server.
"""
