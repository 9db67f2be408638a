#!/bin/bash
awk -F, 'NR>1{s[$1]+=$3} END{for(k in s) print k","s[k]}' /app/clover_report.csv > /app/falcon_totals.csv
