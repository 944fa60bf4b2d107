"""The SQLite store and every SQL statement the server runs."""
