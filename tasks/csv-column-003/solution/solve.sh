#!/bin/bash
cut -d, -f3 /app/data/cabin.csv | tail -n +2 > /app/column.txt
