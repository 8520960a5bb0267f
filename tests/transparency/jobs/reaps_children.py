"""A script that reaps every child it has (os.wait() until ChildProcessError), as process managers do: gputriage's
report worker, then a child of the job, made it wait forever."""

import os
import signal

signal.alarm(60)  # a hang fails the case, not the whole suite
pid = os.fork()
if pid == 0:
    os._exit(3)
reaped = []
while True:
    try:
        reaped.append(os.waitstatus_to_exitcode(os.wait()[1]))
    except ChildProcessError:
        break
print("reaped", reaped)
