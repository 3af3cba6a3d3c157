"""Writers: turn records into NDJSON, Parquet or Hercules binary. No decoding here."""
