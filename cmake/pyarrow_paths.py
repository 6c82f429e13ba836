"""Prints pyarrow's include directory, library directory and version, one per line, for
FindArrowParquet.cmake, after making sure each bundled libX.so.<ABI> has its libX.so link.

pyarrow.create_library_symlinks() would make those links too, but with absolute targets built from
the path the interpreter was reached through. .venv is a link into a cache every clone shares, so
a link made from a clone that is later deleted dangles; create_library_symlinks() then sees no link
(os.path.exists follows it) and fails with FileExistsError. These links are relative (the versioned
file sits beside them), replace a dangling or foreign one atomically, and so are safe when two
builds configure at once.
"""

import glob
import os

import pyarrow

libdir = os.path.dirname(os.path.realpath(pyarrow.__file__))
for hard in glob.glob(os.path.join(libdir, "*.so.*")):
    link = hard.rsplit(".", 1)[0]
    target = os.path.basename(hard)
    if os.path.islink(link):
        if os.readlink(link) == target:
            continue
    elif os.path.exists(link):
        continue  # a real file of that name: leave it
    tmp = f"{link}.tmp{os.getpid()}"
    os.symlink(target, tmp)
    os.replace(tmp, link)

print(pyarrow.get_include())
print(libdir)
print(pyarrow.__version__)
