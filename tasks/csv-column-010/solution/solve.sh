#!/bin/bash
cut -d, -f2 /app/data/yarrow.csv | tail -n +2 > /app/column.txt
