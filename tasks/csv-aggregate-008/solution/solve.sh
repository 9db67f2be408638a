#!/bin/bash
awk -F, 'NR>1{s[$1]+=$2} END{for(k in s) print k","s[k]}' /app/ivory_report.csv > /app/raven_totals.csv
