"""How a saved query becomes a listing: the threshold rules of ADR-508, the plan of
searches they give, and where the ranking is cut.

Shared by the mount, ``kg-fuse eval`` and the scripts (so what they measure is what a
mount lists), and by the server for the presets' offsets. Below the filesystem, the
server and eval; it searches through the client.
"""
