import sys

from teaal_loops.cli import main

sys.exit(main())
