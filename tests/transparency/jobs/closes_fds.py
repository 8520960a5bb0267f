"""A script that closes every descriptor it inherited (os.closerange(3, ...), as daemons do), then opens files of its
own, which take those numbers: gputriage's copy of stderr and its worker's pipes were among them. The job died in
gputriage's code (exit 1, no report); nothing of gputriage's may land in the job's files either."""

import os

os.closerange(3, 4096)
files = [open(f"own_{i}.txt", "w") for i in range(4)]
for i, f in enumerate(files):
    f.write(f"file {i} is the job's own\n")
print("done")
