#!/bin/bash
awk -F, 'NR>1{s[$2]+=$3} END{for(k in s) print k","s[k]}' /app/timber_report.csv > /app/totals.csv
