#!/bin/bash
cut -d, -f2 /app/data/fig.csv | tail -n +2 > /app/basket_column.txt
