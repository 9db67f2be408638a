#!/bin/bash
awk -F, 'NR>1{s[$3]+=$1} END{for(k in s) print k","s[k]}' /app/river_report.csv > /app/totals.csv
