#!/bin/bash
cut -d, -f2 /app/data/panda.csv | tail -n +2 > /app/column.txt
