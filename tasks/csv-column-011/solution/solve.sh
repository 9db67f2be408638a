#!/bin/bash
cut -d, -f3 /app/data/sage.csv | tail -n +2 > /app/column.txt
