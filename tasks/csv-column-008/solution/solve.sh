#!/bin/bash
cut -d, -f5 /app/data/owl.csv | tail -n +2 > /app/beacon_column.txt
