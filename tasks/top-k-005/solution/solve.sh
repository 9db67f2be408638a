#!/bin/bash
sort /app/granite.txt | uniq -c | sort -rn | head -3 | awk '{print $2}' > /app/nutmeg_top.txt
