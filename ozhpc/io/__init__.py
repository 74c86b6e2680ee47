"""HDF5 datasets in and out."""
