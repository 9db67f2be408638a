#!/bin/bash
cut -d, -f3 /app/data/cinder.csv | tail -n +2 > /app/column.txt
