#!/bin/bash
cut -d, -f3 /app/data/clover.csv | tail -n +2 > /app/column.txt
