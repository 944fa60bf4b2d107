"""kg-fuse: saved semantic searches as directories."""


def version() -> str:
    """The installed distribution's version, read only when asked: the metadata import
    costs a command tens of milliseconds of start-up."""
    from importlib import metadata

    try:
        return metadata.version("kg-fuse")
    except metadata.PackageNotFoundError:
        return "0+unknown"
