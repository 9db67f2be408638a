#!/bin/bash
cut -d, -f3 /app/data/moss.csv | tail -n +2 > /app/column.txt
