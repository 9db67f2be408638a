#!/bin/bash
cut -d, -f1 /app/data/sage.csv | tail -n +2 > /app/desert_column.txt
