"""Pure byte-level code: schema, chunk encodings, compression, checksums, layout, metadata.

Nothing here opens files, touches SQLite or maps memory; everything takes and
returns bytes or numpy arrays, so it can be tested byte by byte.
"""
