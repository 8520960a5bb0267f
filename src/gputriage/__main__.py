import sys

from gputriage.cli import main

sys.exit(main())
