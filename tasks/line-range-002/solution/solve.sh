#!/bin/bash
sed -n '19,21p' /app/jasper/wild_forest.txt > /app/castle_excerpt.txt
