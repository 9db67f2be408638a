#!/bin/bash
cut -d, -f3 /app/data/fern.csv | tail -n +2 > /app/column.txt
