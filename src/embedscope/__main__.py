import sys

from embedscope.cli.main import main

sys.exit(main())
