#!/bin/bash
sed -n '3,7p' /app/violet/gentle_nutmeg.txt > /app/excerpt.txt
