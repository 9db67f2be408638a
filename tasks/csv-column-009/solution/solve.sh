#!/bin/bash
cut -d, -f4 /app/data/quill.csv | tail -n +2 > /app/column.txt
