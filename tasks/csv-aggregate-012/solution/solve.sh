#!/bin/bash
awk -F, 'NR>1{s[$3]+=$2} END{for(k in s) print k","s[k]}' /app/zebra_report.csv > /app/totals.csv
