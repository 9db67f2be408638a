#!/bin/bash
cut -d, -f2 /app/data/fern.csv | tail -n +2 > /app/bucket_column.txt
