from gputriage.cli import entry

entry()
