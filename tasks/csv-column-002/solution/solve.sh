#!/bin/bash
cut -d, -f3 /app/data/fig.csv | tail -n +2 > /app/column.txt
