#!/bin/bash
cut -d, -f4 /app/data/nectar.csv | tail -n +2 > /app/column.txt
