"""Entry point of the backfill job: `python jobs/backfill.py --config jobs/configs/backfill.yaml`
locally (starts a local Ray), or `ray job submit -- python jobs/backfill.py --config ...
--ray-address auto` on a cluster. Same as `memray jobs backfill`."""

import sys

from memray.batch.cli import main

if __name__ == "__main__":
    sys.exit(main("backfill", sys.argv[1:]))
