#!/bin/bash
cut -d, -f6 /app/data/summit.csv | tail -n +2 > /app/column.txt
