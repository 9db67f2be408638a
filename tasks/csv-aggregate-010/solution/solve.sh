#!/bin/bash
awk -F, 'NR>1{s[$2]+=$1} END{for(k in s) print k","s[k]}' /app/wolf_report.csv > /app/totals.csv
