import sys

from lab.command import main

sys.exit(main(sys.argv[1:]))
