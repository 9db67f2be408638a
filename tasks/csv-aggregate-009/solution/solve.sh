#!/bin/bash
awk -F, 'NR>1{s[$1]+=$3} END{for(k in s) print k","s[k]}' /app/quill_report.csv > /app/bell_totals.csv
