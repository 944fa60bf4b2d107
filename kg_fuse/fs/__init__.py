"""The filesystem: saved queries as directories, results as files, .meta as controls."""
