"""One run and the files around it, below the commands: the run's options (``config.py``) and job
files (``jobfile.py``), one product from HDF5 to HDF5 (``runner.py``: memory and disk checked first,
``resources.py``), its progress, report and fingerprint, the exact check (``check.py`` on
``reference.py``), the standard test matrices, and the files a user names or this user's config
directory holds (``named_files.py``, ``private_files.py``)."""
