"""Entry point of the migrate job: `python jobs/migrate.py --config jobs/configs/migrate.yaml`
locally (starts a local Ray), or `ray job submit -- python jobs/migrate.py --config ...
--ray-address auto` on a cluster. Same as `memray jobs migrate`."""

import sys

from memray.batch.cli import main

if __name__ == "__main__":
    sys.exit(main("migrate", sys.argv[1:]))
