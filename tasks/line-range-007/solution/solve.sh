#!/bin/bash
sed -n '35,38p' /app/bison/hidden_forest.txt > /app/excerpt.txt
