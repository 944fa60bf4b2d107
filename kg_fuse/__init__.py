"""kg-fuse: saved semantic searches as directories."""
