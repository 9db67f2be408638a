#!/bin/bash
cut -d, -f3 /app/data/yarrow.csv | tail -n +2 > /app/harbor_column.txt
