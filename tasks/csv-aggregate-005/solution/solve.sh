#!/bin/bash
awk -F, 'NR>1{s[$1]+=$2} END{for(k in s) print k","s[k]}' /app/granite_report.csv > /app/totals.csv
