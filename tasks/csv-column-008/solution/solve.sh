#!/bin/bash
cut -d, -f3 /app/data/owl.csv | tail -n +2 > /app/column.txt
