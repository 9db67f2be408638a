#!/bin/bash
sed -n '17,21p' /app/jasper/wild_forest.txt > /app/excerpt.txt
